"""The table's board as the daemon sees it (pure): the driver contract, the keypad
interpreter and the seat lights. Drivers live outside the package (``progressived_drivers``).
"""
