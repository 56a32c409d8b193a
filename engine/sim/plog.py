"""What a simulated device fault leaves behind: a CANN plog file and the engine's stderr.

A real rank that dies of a device fault writes two traces before it goes: the CANN
process log ``~/ascend/log/debug/plog/plog-<pid>_<yyyymmddhhmmssmmm>.log`` with
RUNTIME/ASCENDCL ``[ERROR]`` lines, and torch_npu's EE9999 block on the engine's
stderr. The line layouts are copied from real output:
- plog: ``[ERROR] RUNTIME(<pid>,<proc>):<yyyy-mm-dd-hh:mm:ss.mmm.uuu> [<file>:<line>]<tid> <text>``
  (vllm-ascend issue 7651: "rtsLaunchKernelWithHostArgs:ErrCode=507048, desc=[fftsplus
  timeout], InnerCode=0x715006b" / "... failed, runtime result = 507048.");
- stderr: the EE9999 block of an AICore exception, result 507015 (layout of
  tests/data/logs/torch_npu-EE9999-aicore-507015.log, from vllm-ascend issue 2182).
The sim is under ``<SIM_STATE_DIR>/<node>``, which stands in for the node's $HOME.
"""

from __future__ import annotations

import time
from pathlib import Path


def plog_dir(node_dir: Path) -> Path:
    """The sim node's ``~/ascend/log/debug/plog``."""
    d = node_dir / "ascend" / "log" / "debug" / "plog"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _cann_stamp(now: float) -> str:
    micro = int((now % 1) * 1_000_000)
    return time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(now)) + (
        f".{micro // 1000:03d}.{micro % 1000:03d}"
    )


def write_device_fault(
    node_dir: Path, *, pid: int, device: int = 0, now: float | None = None
) -> tuple[Path, list[str]]:
    """Write the plog of an AICore exception on ``device`` of process ``pid``.

    Returns the plog path and the EE9999 lines the dying process prints on stderr.
    """
    now = time.time() if now is None else now
    tid = pid + 74
    name = f"plog-{pid}_{time.strftime('%Y%m%d%H%M%S', time.localtime(now))}{int((now % 1) * 1000):03d}.log"
    stamp = [_cann_stamp(now + k * 0.000017) for k in range(4)]
    plog = [
        f"[ERROR] RUNTIME({pid},python3):{stamp[0]} [device_error_proc.cc:1281]{tid} "
        f"ProcessStarsCoreErrorInfo:The error from device(chipId:{device}, dieId:0), "
        "serial number is 9, there is an aicore error exception, core id is 12, "
        "error code = 0x800000, dump info: pc start: 0x12c0c1a07000.",
        f"[ERROR] RUNTIME({pid},python3):{stamp[1]} [davinci_kernel_task.cc:1363]{tid} "
        "PreCheckTaskErr:Kernel task happen error, retCode=0x31, [vector core exception].",
        f"[ERROR] RUNTIME({pid},python3):{stamp[2]} [api_c.cc:1580]{tid} "
        "rtDeviceSynchronizeWithTimeout:ErrCode=507015, desc=[aicore exception], "
        "InnerCode=0x715002a",
        f"[ERROR] ASCENDCL({pid},python3):{stamp[3]} [device.cpp:318]{tid} "
        "aclrtSynchronizeDeviceWithTimeout:wait for compute device to finish failed, "
        "runtime result = 507015.",
    ]
    path = plog_dir(node_dir) / name
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n".join(plog) + "\n")
    day = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(now))
    stderr = [
        f"Error:  {day} (PID:{pid}, Device:{device}, RankID:-1) ERR00100 PTA call acl api failed",
        "EE9999: Inner Error!",
        f"EE9999: [PID: {pid}] {stamp[0]} The error from device(chipId:{device}, dieId:0), "
        "serial number is 9, there is an aicore error exception, core id is 12, "
        "error code = 0x800000, dump info: pc start: 0x12c0c1a07000."
        "[FUNC:ProcessStarsCoreErrorInfo][FILE:device_error_proc.cc][LINE:1281]",
        "        TraceBack (most recent call last):",
        "       wait for compute device to finish failed, runtime result = 507015."
        "[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]",
    ]
    return path, stderr


def crash_traces(node_dir: Path, engine_log: Path, *, pid: int) -> Path:
    """Before a simulated crash kills ``pid``: its plog, and its EE9999 block in the engine log."""
    path, stderr = write_device_fault(node_dir, pid=pid)
    with open(engine_log, "a", encoding="utf-8") as fh:
        fh.write("\n".join(stderr) + "\n")
    return path
