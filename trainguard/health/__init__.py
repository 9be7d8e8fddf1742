"""Training health: cheap observations in the loop (loss, throughput, data waits, the
accelerator), the pure judgements over them, and the record the watchdog reads.
"""
