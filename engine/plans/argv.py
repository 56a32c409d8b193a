"""Building one node's `vllm serve` argv and environment from the profile and node specs."""

from __future__ import annotations

from engine.links import LinkMode
from engine.plans.specs import NodeSpec, ProfileSpec
from engine.timeouts import timeout_env

# Intra-server link (reference/ascend-facts.md §4); vllm-ascend sets HCCS on A2.
LINK_ENV: dict[str, dict[str, str]] = {
    LinkMode.HCCS: {"HCCL_INTRA_PCIE_ENABLE": "1", "HCCL_INTRA_ROCE_ENABLE": "0"},
    LinkMode.ROCE: {"HCCL_INTRA_PCIE_ENABLE": "0", "HCCL_INTRA_ROCE_ENABLE": "1"},
}


def _parallel_argv(
    profile: ProfileSpec, node: NodeSpec, head: NodeSpec, n: int
) -> list[str]:
    """Flags that place this node in the parallel layout."""
    argv: list[str] = []
    if node.rank == 0:
        # the OpenAI/Anthropic API listens on the node's own address
        argv += ["--host", node.host_ip]
        # the gateway and health checks call this port
        argv += ["--port", str(node.api_port)]
        if profile.mode == "dp" or profile.api_server_count > 1:
            # front-end processes on the head (vLLM's default is DP size in dp mode)
            argv += ["--api-server-count", str(profile.api_server_count)]
    else:
        # engines only: rank 0 owns the API server and the handshake/rendezvous
        argv += ["--headless"]
    if profile.mode == "dp":
        local = profile.dp // n
        if node.rank > 0:
            # first DP rank on this node; the nodes' ranges must not overlap
            argv += ["--data-parallel-start-rank", str(node.rank * local)]
        # DP replicas across the whole cluster
        argv += ["--data-parallel-size", str(profile.dp)]
        # DP replicas on this node
        argv += ["--data-parallel-size-local", str(local)]
    # TP stays inside a node, over HCCS
    argv += ["--tensor-parallel-size", str(profile.tp)]
    if profile.mode == "tp_pp":
        # PP stages across nodes, over RoCE
        argv += ["--pipeline-parallel-size", str(profile.pp)]
    if profile.expert_parallel:
        # MoE experts split over DP×TP ranks; must be on every node
        argv += ["--enable-expert-parallel"]
    if profile.mode == "dp":
        # rank 0 binds the DP handshake socket here; the others connect to it
        argv += ["--data-parallel-address", head.host_ip]
        # the same port on every node
        argv += ["--data-parallel-rpc-port", str(head.rpc_port)]
    else:
        # multiprocessing executor across nodes, no Ray cluster needed
        argv += ["--distributed-executor-backend", "mp"]
        # nodes in the torch.distributed rendezvous
        argv += ["--nnodes", str(n)]
        # this node's place; rank 0 hosts the store and the API server
        argv += ["--node-rank", str(node.rank)]
        # rendezvous address and port on rank 0
        argv += ["--master-addr", head.host_ip]
        argv += ["--master-port", str(head.rpc_port)]
    return argv


def _model_argv(profile: ProfileSpec) -> list[str]:
    """Flags that are the same on every node."""
    # the name clients put in "model"
    argv = ["--served-model-name", profile.served_model_name]
    # longest prompt + output accepted
    argv += ["--max-model-len", str(profile.max_model_len)]
    # concurrent sequences per DP replica
    argv += ["--max-num-seqs", str(profile.max_num_seqs)]
    # tokens per scheduler step (prefill chunk size)
    argv += ["--max-num-batched-tokens", str(profile.max_num_batched_tokens)]
    # share of HBM vLLM may take for weights, activations and KV cache
    argv += ["--gpu-memory-utilization", str(profile.gpu_memory_utilization)]
    # weight/activation dtype
    argv += ["--dtype", profile.dtype]
    if profile.quantization:
        # "ascend" loads vllm-ascend W8A8/W4A8 checkpoints
        argv += ["--quantization", profile.quantization]
    # explicit both ways: vLLM V1 turns prefix caching on when the flag is absent
    caching = profile.enable_prefix_caching
    argv += ["--enable-prefix-caching" if caching else "--no-enable-prefix-caching"]
    # Qwen3.5 and vllm-ascend checkpoints ship custom config code
    argv += ["--trust-remote-code"]
    return argv


def _node_env(
    profile: ProfileSpec,
    node: NodeSpec,
    used: int,
    nodes: int,
    console_health_timeout_s: int | None = None,
) -> dict[str, str]:
    env = {
        # HCCL's host-side address on this node
        "HCCL_IF_IP": node.host_ip,
        # gloo (CPU collectives), tensorpipe and HCCL's bootstrap bind this NIC
        "GLOO_SOCKET_IFNAME": node.nic_name,
        "TP_SOCKET_IFNAME": node.nic_name,
        "HCCL_SOCKET_IFNAME": node.nic_name,
        # MB per communicator, taken twice (send + receive)
        "HCCL_BUFFSIZE": str(profile.hccl_buffsize_mb),
        # vllm-ascend tutorials: do not pin OpenMP threads, one thread per worker
        "OMP_PROC_BIND": "false",
        "OMP_NUM_THREADS": "1",
        # torch_npu task queue: faster operator dispatch
        "TASK_QUEUE_ENABLE": "1",
        # less HBM fragmentation
        "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
        # the NPUs this node's ranks use
        "ASCEND_RT_VISIBLE_DEVICES": ",".join(str(i) for i in range(used)),
    }
    # intra-server link: HCCS or RoCE
    env.update(LINK_ENV[node.link_mode])
    # HCCL / vLLM timeouts that agree with each other (engine.timeouts); extra_env wins
    aiv = profile.extra_env.get("HCCL_OP_EXPANSION_MODE", "").upper() == "AIV"
    env.update(
        timeout_env(
            nodes=nodes, aiv=aiv, console_health_timeout_s=console_health_timeout_s
        )
    )
    env.update(profile.extra_env)
    return env
