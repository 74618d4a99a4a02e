"""A replica's parallel layout (TP x PP x EP x DP), its placement on nodes and what each GPU holds."""
