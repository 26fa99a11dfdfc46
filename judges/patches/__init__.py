"""Patch ops: shape checks, simulation against the files, all-or-nothing application, the
accepted patch formats (ops JSON, unified diff) and the line diff.

May import: judges.inputs, judges.errors. Never a model.
"""
