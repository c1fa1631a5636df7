"""A PyTorch training loop that survives preemption on sparecap, and resumes
to the very weights of a run never interrupted.

Run it under the wrapper, as the container's entrypoint:

    sparecap run --checkpoint-dir /ckpt --region us-central-2 --gpu-type H100_SXM \\
        -- python3 pytorch_train.py --steps 100000

On a laptop (the CPU, a small model, a few seconds):

    SPARECAP_CHECKPOINT_DIR=/tmp/ckpt python3 pytorch_train.py --steps 300 --width 64

What it does:
- trains on the GPU when there is one, else on the CPU;
- resumes from the latest complete checkpoint with everything that makes
  the run reproducible: model, optimizer, learning-rate schedule, step, and
  the random generators of torch (CPU and GPU), NumPy and Python;
- saves through the SDK's atomic store on a schedule (Daly's interval for
  the pool's preemption rate, which sparecap run passes, and the time the
  store really took to save) and at once on the notice, then exits so the
  node is released early and the job is rescheduled on a refilled node;
- says what each save cost and the interval it leads to.
"""

import argparse
import os
import random
import sys
import threading

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
import sparecap_preempt as sp  # noqa: E402


def flags(description):
    """The flags of a run; ddp_train.py adds its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=100_000, help="optimizer steps in all")
    p.add_argument("--width", type=int, default=1024, help="the model's width")
    p.add_argument("--batch", type=int, default=64, help="examples a step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0, help="seeds torch, NumPy and Python at a fresh start")
    p.add_argument("--device", default="auto", help="auto (cuda when there is one), cuda or cpu")
    p.add_argument("--interval", type=float, default=1800, help="seconds between checkpoints without a measured rate")
    p.add_argument("--out", help="write the final weights here (raw bytes, parameters in name order)")
    p.add_argument("--step-log", help="append each step done to this file (to check none is lost or repeated)")
    p.add_argument("--progress", help="write the last step done here (sparecap's job simulator reads it)")
    return p


def checked(p, a):
    if a.steps <= 0 or a.width <= 0 or a.batch <= 0 or a.interval <= 0:
        p.error("--steps, --width, --batch and --interval must be positive")
    return a


class Log:
    """The step log and the progress file, when asked for."""

    def __init__(self, a):
        self.log = open(a.step_log, "a", encoding="utf-8") if a.step_log else None
        self.progress = open(a.progress, "w+", encoding="utf-8") if a.progress else None

    def done(self, step):
        if self.log:
            self.log.write("%d\n" % step)
            self.log.flush()
        if self.progress:
            # One fixed-width write in place: a reader never sees it empty.
            self.progress.seek(0)
            self.progress.write("%20d" % step)
            self.progress.flush()


def device_of(name):
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        # cuBLAS is deterministic with a fixed workspace (set before CUDA starts).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    return torch.device(name)


class Run:
    """The model, its optimizer and schedule, and the step."""

    def __init__(self, a, dev, rank=0):
        self.a, self.dev, self.step = a, dev, 0
        # The task (what the model learns) is the seed's; each rank of a
        # gang draws its own batches from generators seeded apart.
        self.target = torch.randn(a.width, a.width, generator=torch.Generator().manual_seed(a.seed)).to(dev)
        torch.manual_seed(a.seed + rank)
        np.random.seed(a.seed + rank)
        random.seed(a.seed + rank)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(a.width, a.width)).to(dev)
        self.net = self.model  # what the batch goes through (a DistributedDataParallel in ddp_train.py)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=a.lr)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=a.steps)

    def train_one_step(self):
        # Every generator has a part: torch draws the batch (and the
        # dropout), NumPy the noise, Python which half is flipped.
        x = torch.randn(self.a.batch, self.a.width)
        noise = float(np.random.uniform(0.0, 0.1))
        if random.random() < 0.5:
            x[: self.a.batch // 2] *= -1
        x = x.to(self.dev)
        y = x @ self.target + noise * torch.randn(self.a.batch, self.a.width).to(self.dev)
        loss = (self.net(x) - y).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.sched.step()
        self.step += 1
        return loss.item()

    def rng(self):
        """The random generators' states."""
        rng = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
        if self.dev.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state_all()
        return rng

    def set_rng(self, rng):
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        if "cuda" in rng and self.dev.type == "cuda":
            torch.cuda.set_rng_state_all(rng["cuda"])

    def state(self, rng=None):
        return {"step": self.step, "model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(), "rng": self.rng() if rng is None else rng}

    def load(self, st, rng=None):
        self.step = st["step"]
        self.model.load_state_dict(st["model"])
        self.opt.load_state_dict(st["optimizer"])
        self.sched.load_state_dict(st["scheduler"])
        self.set_rng(st["rng"] if rng is None else rng)

    def weights(self):
        """The parameters as raw bytes, in name order: equal runs, equal bytes."""
        sd = self.model.state_dict()
        return b"".join(sd[k].detach().cpu().contiguous().numpy().tobytes() for k in sorted(sd))


def resume(run, store):
    try:
        ck = store.latest()
    except sp.NoCheckpoint:
        print("starting from scratch on", run.dev, flush=True)
        return
    run.load(torch.load(os.path.join(ck.dir, "state.pt"), map_location=run.dev))
    print("resumed at step", run.step, "on", run.dev, flush=True)


def main(argv=None):
    p = flags("A preemption-safe PyTorch training loop.")
    a = checked(p, p.parse_args(sys.argv[1:] if argv is None else argv))
    dev = device_of(a.device)
    run = Run(a, dev)
    store = sp.Store()  # SPARECAP_CHECKPOINT_DIR
    resume(run, store)
    schedule = sp.Schedule(store, default=a.interval, first=min(a.interval, 60))
    noticed = threading.Event()
    sp.on_notice(lambda n: noticed.set())  # the wrapper's checkpoint signal, SIGTERM, the annotation

    def save(why):
        store.save(run.step, lambda d: torch.save(run.state(), os.path.join(d, "state.pt")))
        schedule.saved()
        print("checkpointed step %d (%s); checkpoint %s" % (run.step, why, schedule.describe()), flush=True)

    log = Log(a)
    loss = float("nan")  # resumed at the last step: nothing left to train
    while run.step < a.steps:
        loss = run.train_one_step()
        log.done(run.step)
        if noticed.is_set():
            save("on the notice")
            print("exiting: the node is being reclaimed", flush=True)
            return 0
        if schedule.due():
            save("on schedule")
    save("at the end")
    print("done: %d steps, loss %.6f" % (run.step, loss), flush=True)
    if a.out:
        with open(a.out, "wb") as f:
            f.write(run.weights())
    return 0


if __name__ == "__main__":
    sys.exit(main())
