"""Smoke runs: a few real optimizer steps of a rendered config, counted on every rank.

``command`` builds argument lists (pure), ``runner`` runs them locally in their own process
group, ``slurm`` submits and follows them on a cluster, ``worker`` is the program each rank
runs, and ``engines/`` holds one module per framework. torch and the frameworks are imported
only inside the rank processes.
"""
