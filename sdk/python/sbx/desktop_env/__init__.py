"""OSWorld's DesktopEnv on sbx: the reset -> step -> evaluate loop over OSWorld's task files,
each environment a fresh sbx sandbox with a desktop (a reset is a new sandbox: well under a
second, against a VM snapshot revert). An agent written for OSWorld changes one import:

    from sbx.desktop_env import DesktopEnv
    env = DesktopEnv(action_space="pyautogui", screen_size=(1920, 1080))
    obs = env.reset(task_config=task)               # OSWorld's task JSON (a dict)
    obs, reward, done, info = env.step("pyautogui.click(100, 200)", pause=0.5)
    score = env.evaluate()
    env.close()

Task setup and getters talk to OSWorld's in-VM API, which sbx runs on port 5000 of the
sandbox (through the server's router); actions go to the desktop API. docs/desktop-env.md lists
the setup steps, getters and metrics this supports.
"""

from .env import DesktopEnv, SetupError, EvaluationError

__all__ = ["DesktopEnv", "SetupError", "EvaluationError"]
