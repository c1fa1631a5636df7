"""A PyTorch training loop that survives preemption on sparecap.

Run it under the wrapper, as the container's entrypoint:

    sparecap run --checkpoint-dir /ckpt --region eu-west --gpu-type h100 \\
        -- python3 pytorch_train.py

What it does:
- resumes from the latest complete checkpoint (SPARECAP_RESUME_FROM, or the
  store's latest) with model, optimizer, scheduler and step;
- saves every SPARECAP_CHECKPOINT_INTERVAL (which sparecap run worked out
  from the measured preemption rate) and at once on the notice;
- exits right after the notice checkpoint, so the node is released early
  and the pod is rescheduled on a refilled node.

This file is documentation: it needs torch, which the SDK's tests do not.
"""

import os
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import sparecap_preempt as sp  # noqa: E402


def main():
    model = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100_000)
    store = sp.Store()  # SPARECAP_CHECKPOINT_DIR
    step = 0
    try:
        ck = store.latest()
        state = torch.load(os.path.join(ck.dir, "state.pt"), map_location="cuda")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        step = ck.step
        print("resumed at step", step, flush=True)
    except sp.NoCheckpoint:
        print("starting from scratch", flush=True)

    noticed = threading.Event()
    sp.on_notice(lambda n: noticed.set())  # SIGUSR1 from the wrapper, SIGTERM, the annotation
    interval = sp.checkpoint_interval(default=1800)  # from the measured rate, via sparecap run
    last = time.monotonic()

    def save():
        # Torch writes into the temporary directory; the store fsyncs,
        # writes the manifest and renames it into place.
        store.save(step, lambda d: torch.save(
            {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
            os.path.join(d, "state.pt")))

    while step < 100_000:
        x = torch.randn(64, 1024, device="cuda")
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        step += 1
        if noticed.is_set():
            save()
            print("checkpointed step", step, "on the notice; exiting", flush=True)
            return 0
        if time.monotonic() - last >= interval:
            save()
            last = time.monotonic()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
