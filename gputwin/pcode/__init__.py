"""gputwin.pcode"""
