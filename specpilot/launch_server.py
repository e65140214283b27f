"""`python -m specpilot.launch_server [flags]`: start the engine and serve HTTP (SGLang's flags).

Order: parse ServerArgs (one flag per field), set up logging at --log-level, fill in the demo
model when --model-path is absent, build the engine (its scheduler thread starts there), create
the app, run uvicorn on --host/--port, log the URL once the socket listens; on exit the engine
is shut down.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Optional

logger = logging.getLogger("specpilot.launch_server")


def resolve_args(args):
    """ServerArgs with model_path filled in (the embedded demo model when none was given)."""
    if args.model_path is None:
        from specpilot.demo import demo_model_path

        args = dataclasses.replace(args, model_path=str(demo_model_path()))
    return args


def serve(args) -> None:
    import uvicorn

    from specpilot.server.http import create_app
    from specpilot.server.launch import build_engine_client

    client = build_engine_client(args)
    try:
        app = create_app(client, args)
        config = uvicorn.Config(app, host=args.host, port=args.port,
                                log_level=args.log_level.lower(), timeout_keep_alive=5)
        server = uvicorn.Server(config)
        startup = server.startup

        async def startup_and_announce(sockets=None):
            await startup(sockets)
            if server.started:
                logger.info("The server is fired up and ready to roll! URL: http://%s:%d "
                            "(model %s)", args.host, args.port, app.state.tm.served_model_name)

        server.startup = startup_and_announce
        server.run()
    finally:
        client.shutdown()


def main(argv: Optional[list[str]] = None) -> None:
    from specpilot.config import ServerArgs

    args = ServerArgs.from_cli(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="[%(asctime)s %(name)s] %(levelname)s %(message)s",
                        stream=sys.stderr)
    args = resolve_args(args)
    logger.info("server args: %s", args)
    serve(args)


if __name__ == "__main__":
    main()
