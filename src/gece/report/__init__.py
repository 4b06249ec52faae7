"""The report: tables (:mod:`gece.report.tables`, in page order, from the builders it names), their
markdown (:mod:`gece.report.markdown`) and the HTML page (:mod:`gece.report.html`, with its package data
``page.css`` and ``page.html``)."""
