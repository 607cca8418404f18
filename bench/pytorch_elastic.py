#!/usr/bin/python3
"""The restart-loop peer: the benchmark GPT trained by 2 Gloo ranks (DDP) that
restart from their latest checkpoint when a rank dies, as PyTorch's elastic
documentation tells users to (torchrun restarts the whole group from the
script's own checkpoint). Debian's torchrun (torch 1.13 under Python 3.11)
fails at start, so this launcher does what it would: it starts the ranks with
the environment-variable method (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE),
watches them, and when one exits abnormally kills the others and starts the
group again. It also plays the spot market: --kill-at K kills rank 1 (SIGKILL)
as step K begins, once per K, and its replacement is ready --replace-after-s
later (the group restarts then).

Each rank takes half of every step's micro-batches (the global batch is the
same as one process's); rank 0 saves a checkpoint (model, optimizer, step)
every --checkpoint-every steps, written to a temporary file and renamed. The
launcher prints one JSON line per committed step as rank 0 reports it,
{"step", "loss", "seconds", "wall"}, a line per kill and restart, and at the end
{"done": true, "wall": ..., "restarts": ..., "redone": ...}.

Run it with Debian's interpreter (/usr/bin/python3, package python3-torch).
"""
import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt_options import add_model_options  # noqa: E402 (after the path)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(a):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    from pytorch_gpt import Training, lr_at

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = Training(a)
    model, opt = t.model, t.opt
    ckpt = os.path.join(a.checkpoint_dir, "latest.pt")
    first = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        first = state["step"]
    # The causal mask is a bool buffer, which Gloo cannot broadcast; every rank
    # builds the same one.
    DDP._set_params_and_buffers_to_ignore_for_model(model, ["mask"])
    ddp = DDP(model)
    micro = a.global_batch // a.micro_batch
    mine = [j for j in range(micro) if j % world == rank]
    for step in range(first, a.steps):
        start = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.steps, a.lr, a.warmup)
        opt.zero_grad(set_to_none=True)
        total = torch.zeros(1)
        for i, j in enumerate(mine):
            rows = t.rows(step, j)
            last = i == len(mine) - 1
            with ddp.no_sync() if not last else contextlib.nullcontext():
                logits = ddp(rows[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                       rows[:, 1:].reshape(-1))
                # DDP averages over ranks: scale so the sum is the global mean.
                (loss * world / micro).backward()
            total += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dist.all_reduce(total)
        if rank == 0:
            if (step + 1) % a.checkpoint_every == 0:
                tmp = ckpt + ".tmp"
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                            "step": step + 1}, tmp)
                os.replace(tmp, ckpt)
            print(json.dumps({"step": step, "loss": total.item() / micro,
                              "seconds": time.perf_counter() - start}), flush=True)
    dist.destroy_process_group()
    return 0


def launch(a, passthrough):
    os.makedirs(a.checkpoint_dir, exist_ok=True)
    kills = sorted(set(a.kill_at))
    started = time.monotonic()
    restarts, committed, redone = 0, set(), 0
    env_base = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads),
                    OMP_NUM_THREADS=str(a.threads), MASTER_ADDR="127.0.0.1")
    while True:
        port = free_port()
        ranks = []
        for r in range(2):
            env = dict(env_base, MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE="2")
            ranks.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--rank"] + passthrough,
                env=env, stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL,
                text=True))
        killed_at = None
        for line in ranks[0].stdout:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            k = rec["step"]
            if k in committed:
                redone += 1
            committed.add(k)
            rec["wall"] = time.monotonic() - started
            print(json.dumps(rec), flush=True)
            if kills and k + 1 == kills[0]:  # step k+1 begins: the instance goes
                kills.pop(0)
                ranks[1].send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
                print(json.dumps({"kill": "rank 1", "step": k + 1,
                                  "wall": time.monotonic() - started}), flush=True)
        codes = []
        for p in ranks:
            # A survivor blocked in a collective with a dead peer: Gloo raises
            # when the connection drops; a hang is ended here, as torchrun would.
            try:
                codes.append(p.wait(timeout=60))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append(p.wait())
        failed = any(c != 0 for c in codes)
        failed_at = time.monotonic() - started  # every rank of the group ended
        if not failed and max(committed, default=-1) == a.steps - 1:
            break
        for p in ranks:
            if p.poll() is None:
                p.kill()
        restarts += 1
        # The killed rank's instance is gone: the group starts again when a
        # replacement is there.
        if killed_at is not None:
            time.sleep(max(0.0, killed_at + a.replace_after_s - time.monotonic()))
        if restarts > a.max_restarts:
            print(json.dumps({"done": False, "why": "too many restarts"}), flush=True)
            return 1
        print(json.dumps({"restart": restarts, "exit_codes": codes, "failed": failed_at,
                          "wall": time.monotonic() - started}), flush=True)
    print(json.dumps({"done": True, "wall": time.monotonic() - started,
                      "restarts": restarts, "redone": redone}), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--data", required=True)
    ap.add_argument("--checkpoint-dir", required=True)
    ap.add_argument("--checkpoint-every", type=int, default=10)
    ap.add_argument("--kill-at", type=int, action="append", default=[])
    ap.add_argument("--max-restarts", type=int, default=10)
    ap.add_argument("--replace-after-s", type=float, default=0.0,
                    help="a killed rank's replacement is there this long after the kill")
    add_model_options(ap, seq_len=64, d_model=64, heads=4, micro_batch=2,
                      global_batch=8, steps=50)
    a = ap.parse_args()
    if a.rank:
        return rank_main(a)
    # The ranks get the launcher's options but the kills.
    clean, skip = [], False
    for x in sys.argv[1:]:
        if skip:
            skip = False
            continue
        if x == "--kill-at":
            skip = True
            continue
        if x.startswith("--kill-at="):
            continue
        clean.append(x)
    return launch(a, clean)


if __name__ == "__main__":
    sys.exit(main())
