"""The review menu and the poller/stager interview (seed 000): the question protocol, the
poller agent, the machines' bindings, the driver and the front ends."""
