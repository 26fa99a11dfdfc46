"""A/B comparison: a pairwise judge over text or images, position-swapped, with a tie rule.

May import: judges.store and every layer below it, prompts. Not the other judges.
"""
