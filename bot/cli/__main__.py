"""``python -m bot.cli …`` is ``hazel …``."""

from bot.cli import main

main()
