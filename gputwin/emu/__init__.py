"""gputwin.emu"""
