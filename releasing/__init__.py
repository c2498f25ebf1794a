"""The release path of the Python package: reproducible builds, install routes, workflows.

Thin commands in tools/ call these modules; the release workflows call the same commands.
"""
