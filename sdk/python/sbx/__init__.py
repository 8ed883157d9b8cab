"""sbx: the Python SDK of the sbx sandbox platform (standard library only).

    import sbx
    client = sbx.Client()                      # SBX_HOST / SBX_API_KEY / the local server
    with client.create() as sandbox:           # deleted at the end of the block
        print(sandbox.commands.run("uname -a").text)
        sandbox.files.write("/tmp/x", "hello")
        print(sandbox.code.run("2 + 2").results)

    with client.create(desktop=True) as sandbox:  # a GUI desktop, up when create returns
        png = sandbox.desktop.screenshot()
        sandbox.desktop.act({"action_type": "CLICK", "parameters": {"x": 10, "y": 20}})
"""

from .client import Client
from .code import Context
from .commands import CommandStatus, Execution
from .desktop import ActionResult, Desktop, DesktopStatus, Window
from .errors import (AuthError, CommandError, ConflictError, ConnectionFailed, NotFoundError,
                     SbxError)
from .files import FileInfo
from .sandbox import Sandbox, SandboxInfo

__version__ = "0.1.0"
__all__ = ["Client", "Sandbox", "SandboxInfo", "Execution", "CommandStatus", "Context",
           "FileInfo", "SbxError", "NotFoundError", "ConflictError", "AuthError",
           "ConnectionFailed", "CommandError", "Desktop", "DesktopStatus", "Window",
           "ActionResult"]
