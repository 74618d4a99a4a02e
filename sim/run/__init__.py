"""A whole run: simulate, tabulate, summarise and write the run folder (files, plots, intervals)."""
