"""``progressived archive``: the process that receives and stores every table's rows."""
