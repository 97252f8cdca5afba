"""gputwin.mock"""
