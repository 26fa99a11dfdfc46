"""The one reply-reading path every judge uses (structured output, tolerant extraction,
validation, one repair retry, typed failures keeping the raw text) and the verdict conventions and
scales read from free text.

May import: judges.models, judges.errors.
"""
