"""speak: text, JSON, colour and progress; decides nothing; the folder that speaks.
"""
