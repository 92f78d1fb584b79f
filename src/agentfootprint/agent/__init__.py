"""The composition root: ``Agent`` resolves store URLs and options into features, a chart and a
run.
"""
