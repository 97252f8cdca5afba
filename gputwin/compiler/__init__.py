"""gputwin.compiler"""
