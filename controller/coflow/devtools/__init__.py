"""Checks on the code's shape that ``make lint`` runs (:mod:`coflow.devtools.layout`)."""
