from preemptd.daemon.cli import entry

entry()
