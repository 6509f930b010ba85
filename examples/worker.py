"""A self-hosted worker for a Mast environment, built on the official SDK's EnvironmentWorker.

It polls the environment's work queue, and for each session it claims, runs the agent's
sandbox tools (bash, read, write, edit, glob, grep) in --workdir on this machine, heartbeating
the item's lease while it serves the session. The session's `file` resources are downloaded
with the item's token to their `mount_path` (read-only) before its first tool runs: the SDK's
worker fetches skills and memory stores itself, but not files.

    pip install 'anthropic==2.10.0'
    MAST_URL=http://127.0.0.1:8080 \\
    MAST_ENVIRONMENT_ID=env_... \\
    MAST_ENVIRONMENT_KEY=mast_ek_... \\
        python examples/worker.py --workdir ./workspace
"""

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path


async def mount_files(ctx) -> None:
    """Puts each `file` resource of the session at its mount path, read-only, and lets the
    file tools read there (they are confined to the workdir and `allowed_roots`)."""
    for r in ctx.session.resources:
        if r.type != "file":
            continue
        target = Path(r.mount_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f".{target.name}.part")
        # The work token may read exactly the files its session mounts.
        async with ctx.client.beta.files.with_streaming_response.download(r.file_id) as resp:
            with open(part, "wb") as out:
                async for chunk in resp.iter_bytes(1 << 20):
                    out.write(chunk)
        os.chmod(part, 0o444)
        os.replace(part, target)
        root = target.parent.resolve()
        ctx.allowed_roots.append(root)
        ctx.read_only_roots.append(root)


def toolset_with_files(ctx):
    """The SDK's built-in tools, each first waiting for the session's files to be in place.
    The download runs on the worker's event loop, next to the lease heartbeat."""
    from anthropic.lib.tools.agent_toolset import beta_agent_toolset_20260401

    tools = beta_agent_toolset_20260401(ctx)
    if not any(r.type == "file" for r in ctx.session.resources):
        return tools
    ready = asyncio.get_running_loop().create_task(mount_files(ctx))
    for tool in tools:
        async def call(input, _run=tool.call):
            await ready
            return await _run(input)
        tool.call = call
    return tools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default=os.getcwd(), help="where the session's tools run (default: cwd)")
    parser.add_argument("--max-idle", type=float, default=60.0,
                        help="seconds to keep serving a session after its turn ends (default: 60)")
    parser.add_argument("--memory-sync-interval", type=float, default=15.0,
                        help="seconds between syncs of the session's memory stores while it runs, at least 5; "
                             "0 turns memory stores off (default: 15)")
    parser.add_argument("--worker-id", default=None, help="sent as Anthropic-Worker-ID (default: host + random)")
    args = parser.parse_args()
    missing = [v for v in ("MAST_URL", "MAST_ENVIRONMENT_ID", "MAST_ENVIRONMENT_KEY") if not os.environ.get(v)]
    if missing:
        parser.print_usage(sys.stderr)
        sys.exit(
            f"worker.py: set {', '.join(missing)}: the server's URL, a self_hosted environment's id, and a worker "
            "key of that environment (POST /v1/environments/{id}/keys, or `mast keys create --environment ENV_ID`)"
        )
    try:
        import anthropic
        from anthropic.lib.environments import EnvironmentWorker
    except ImportError:
        sys.exit("worker.py needs the official SDK: pip install 'anthropic==2.10.0'")
    logging.basicConfig(level=os.environ.get("WORKER_LOG", "INFO"), format="%(asctime)s %(name)s %(message)s")
    os.makedirs(args.workdir, exist_ok=True)

    # The worker authenticates with the environment key alone (Bearer); the client's own
    # credential is never sent by the worker's scoped sub-clients.
    client = anthropic.AsyncAnthropic(base_url=os.environ["MAST_URL"], auth_token=os.environ["MAST_ENVIRONMENT_KEY"])
    worker = EnvironmentWorker(
        client,
        environment_id=os.environ["MAST_ENVIRONMENT_ID"],
        environment_key=os.environ["MAST_ENVIRONMENT_KEY"],
        workdir=args.workdir,
        tools=toolset_with_files,
        max_idle=args.max_idle,
        worker_id=args.worker_id,
        # Attached memory stores are downloaded to their mount paths (/mnt/memory/<slug>, which
        # this user must be able to create) and synced back with the item's sessions token.
        memory_sync_interval=args.memory_sync_interval or None,
    )
    asyncio.run(worker.run())


if __name__ == "__main__":
    main()
