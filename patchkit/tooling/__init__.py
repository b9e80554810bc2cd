"""tooling: the registry's tooling: vendor (with the forge formats), new (scaffold), the demo.
"""
