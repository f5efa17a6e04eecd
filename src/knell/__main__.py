from knell.cli import entry

entry()
