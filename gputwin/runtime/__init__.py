"""gputwin.runtime"""
