"""Constraints of the API that an OpenAPI 3.1 document cannot state, for schemathesis.

`cursor` and `offset` are each valid alone and refused together (400), a dependency between
parameters that OpenAPI has no way to express; generated requests never combine them.
"""

import schemathesis


@schemathesis.hook
def filter_query(ctx, query):
    return not (query and "cursor" in query and "offset" in query)
