"""A self-hosted worker for a Mast environment, built on the official SDK's EnvironmentWorker.

It polls the environment's work queue, and for each session it claims, runs the agent's
sandbox tools (bash, read, write, edit, glob, grep) in --workdir on this machine, heartbeating
the item's lease while it serves the session.

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
        max_idle=args.max_idle,
        worker_id=args.worker_id,
        # Attached memory stores are downloaded to their mount paths (/mnt/memory/<slug>, which
        # this user must be able to create) and synced back with the item's sessions token.
        memory_sync_interval=args.memory_sync_interval or None,
    )
    asyncio.run(worker.run())


if __name__ == "__main__":
    main()
