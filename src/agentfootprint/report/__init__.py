"""The self-verifying HTML report of runs (``agentfootprint report``): see docs/report.md."""

from agentfootprint.report.build import REPORT_FORMAT, Report, report_html

__all__ = ["REPORT_FORMAT", "Report", "report_html"]
