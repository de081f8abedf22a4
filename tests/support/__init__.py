"""Helpers shared by the tests (imported as ``tests.support.x``): test doubles (the
scripted model server, the recording and fault-injecting proxies), loopback servers, stack
runs, table builders and the checkout's paths. No tests here; no test module imports another."""
