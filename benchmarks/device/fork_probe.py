"""What a forked child can do with CUDA after its parent warmed up like a worker zygote.

Run on a CUDA machine: a parent imports torch, CuPy and SigPy and runs the zygote's
`torch.compile` warm-up on a CPU tensor (with `PYTORCH_NVML_BASED_CUDA_CHECK` set or not), then
forks children that use CUDA through torch, through CuPy, and compile a CPU function. Prints one
line per case, so the worker design for CUDA jobs can rest on what was seen, not assumed.
"""

from __future__ import annotations

import os
import sys


def child(task: str) -> int:
    import torch

    if task == "torch-cuda":
        print("   ", float((torch.ones(4, device="cuda") * 2).sum()))
    elif task == "cupy-cuda":
        import cupy

        print("   ", float((cupy.ones(4) * 2).sum()))
    elif task == "compile-cpu":
        f = torch.compile(lambda x: torch.sin(x) + 1)
        print("   ", float(f(torch.ones(4)).sum()))
    return 0


def main() -> int:
    import cupy  # noqa: F401
    import sigpy  # noqa: F401
    import torch

    f = torch.compile(lambda x: torch.cos(x) * 2)
    f(torch.ones(8))
    print(f"parent: NVML check={os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK')!r}, "
          f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}, "
          f"torch.cuda initialised after the warm-up: {torch.cuda.is_initialized()}")
    for task in ("torch-cuda", "cupy-cuda", "compile-cpu"):
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                code = child(task)
            except Exception as e:  # noqa: BLE001
                print(f"    {type(e).__name__}: {str(e)[:150]}")
                code = 1
            sys.stdout.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(f"  child {task}: {'ok' if status == 0 else 'FAILED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
