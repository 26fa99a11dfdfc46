"""Caller input made harmless: paths resolved once under the allowed roots and used through
directory file descriptors, and images loaded within size and pixel bounds.

May import: judges.models (the image part type), judges.errors.
"""
