"""pytorch_train.py's loop as a data-parallel gang: one process per node,
torch.distributed over gloo (or NCCL on GPUs), each rank under
``sparecap run``. A reclaim of any rank's node stops the whole gang at the
same step, the gang checkpoints once, and every rank exits, so the gang
restarts together on the refilled nodes and ends with the weights of a
run never interrupted.

How a rank that was not reclaimed learns of it: after every step the ranks
take the maximum of their "noticed" flags (one all_reduce of one number),
and the reclaimed rank's flag is set by the SDK's notice. So every rank
stops at the same step, at once; none waits for a collective to time out
on a peer that is gone.

The rendezvous comes from the environment, as torchrun, a Kubernetes
indexed Job or JobSet, and Slurm give it: RANK (else
JOB_COMPLETION_INDEX or SLURM_PROCID), WORLD_SIZE (else SLURM_NTASKS),
MASTER_ADDR and MASTER_PORT; flags override them.

Exit codes: 0 once training is done; 75 when the gang stopped for a
reclaim (the rank whose node was reclaimed exits 0 after the gang's
checkpoint, which ``sparecap run`` reports as 75 too): run it again.
"""

import datetime
import os
import sys
import threading

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
import sparecap_preempt as sp  # noqa: E402
from pytorch_train import Log, Run, checked, device_of, flags  # noqa: E402

EXIT_GANG_STOPPED = 75  # EX_TEMPFAIL: the gang stopped for a reclaim; restart it


def rendezvous(a):
    """Fills the rank, the world size and the master's address from the
    flags, else the environment."""
    env = os.environ
    a.rank = a.rank if a.rank is not None else int(env.get("RANK") or env.get("JOB_COMPLETION_INDEX") or env.get("SLURM_PROCID") or 0)
    a.world_size = a.world_size or int(env.get("WORLD_SIZE") or env.get("SLURM_NTASKS") or 1)
    os.environ["MASTER_ADDR"] = a.master_addr or env.get("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(a.master_port or env.get("MASTER_PORT", "29500"))
    if not 0 <= a.rank < a.world_size:
        sys.exit("rank %d is not below the world size %d" % (a.rank, a.world_size))


def gang_checkpoint(run, store, a):
    """Rank 0 saves the model, the optimizer, the schedule and every rank's
    random state, once; the others wait until it is committed."""
    states = [None] * a.world_size
    dist.all_gather_object(states, run.rng())
    if a.rank == 0:
        store.save(run.step, lambda d: torch.save(run.state(rng=states), os.path.join(d, "state.pt")))
    dist.barrier()


def resume(run, store, a):
    try:
        ck = store.latest()
    except sp.NoCheckpoint:
        print("rank %d: starting from scratch on %s" % (a.rank, run.dev), flush=True)
        return
    st = torch.load(os.path.join(ck.dir, "state.pt"), map_location=run.dev)
    run.load(st, rng=st["rng"][a.rank])
    print("rank %d: resumed at step %d on %s" % (a.rank, run.step, run.dev), flush=True)


def main(argv=None):
    p = flags("A preemption-safe data-parallel PyTorch gang.")
    p.add_argument("--rank", type=int, help="this process's rank (default: RANK, JOB_COMPLETION_INDEX or SLURM_PROCID)")
    p.add_argument("--world-size", type=int, help="processes in the gang (default: WORLD_SIZE or SLURM_NTASKS)")
    p.add_argument("--master-addr", help="rank 0's address (default: MASTER_ADDR, else 127.0.0.1)")
    p.add_argument("--master-port", type=int, help="rank 0's port (default: MASTER_PORT, else 29500)")
    a = checked(p, p.parse_args(sys.argv[1:] if argv is None else argv))
    rendezvous(a)
    dev = device_of(a.device)
    run = Run(a, dev, rank=a.rank)
    store = sp.Store()  # SPARECAP_CHECKPOINT_DIR: the gang's shared volume
    resume(run, store, a)
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", rank=a.rank, world_size=a.world_size,
                            timeout=datetime.timedelta(seconds=120))
    run.net = DistributedDataParallel(run.model)
    noticed = threading.Event()
    sp.on_notice(lambda n: noticed.set())
    log = Log(a)
    while run.step < a.steps:
        run.train_one_step()
        log.done(run.step)
        stop = torch.tensor([1 if noticed.is_set() else 0], device=dev)
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop.item():
            gang_checkpoint(run, store, a)
            print("rank %d: the gang stopped at step %d for a reclaim%s" % (
                a.rank, run.step, " of this node" if noticed.is_set() else ""), flush=True)
            dist.destroy_process_group()
            return 0 if noticed.is_set() else EXIT_GANG_STOPPED
    gang_checkpoint(run, store, a)
    if a.rank == 0 and a.out:
        with open(a.out, "wb") as f:
            f.write(run.weights())
    print("rank %d: done, %d steps" % (a.rank, run.step), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
