"""llmk's GPU cost model (see README.md here): roofline and PREDICTED times of the benchmarks on Hopper.

  hardware  the GPU table (datasheet numbers and stated assumptions)
  names     Google Benchmark names -> family, template arguments, arguments
  work      FLOPs and bytes of every benchmark family (the benchmarks' own counter formulas)
  shapes    the shapes the GPU benchmarks run
  sass      static/report.tsv and the benchmark -> kernel mapping table
  predict   roofline and the SASS-count prediction
  results   reading a results folder (meta.json, Google Benchmark JSON)
  pairs     the llmk benchmark <-> anchor pairing table
  report    one row per measured benchmark (summarize.py, plot_results.py)
  model.py  the command line: the model's table without any measurement
"""
