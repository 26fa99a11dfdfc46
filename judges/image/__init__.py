"""The image judges: one agent judging one image, the evaluation service (retrieval, judging,
ranking, runs and plateaus), the prompt optimizer and the score chart.

May import: judges.store and every layer below it, rag, prompts. Not the other judges.
"""
