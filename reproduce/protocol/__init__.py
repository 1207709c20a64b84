"""Protocol: how the study is run and decided — tuning, the study that resolves arms to tuned runs, the plan with
its cost and progress, data preparation, the verdict rule and the ledger, claim rows, calibration, the verdict
simulation and the main comparison."""
