"""The study's driver: plan the runs a profile needs, run the missing ones, write results/."""
