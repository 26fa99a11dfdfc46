"""Evaluation of JSON analyses against their source material.

May import: judges.store and every layer below it, prompts. Not the other judges.
"""
