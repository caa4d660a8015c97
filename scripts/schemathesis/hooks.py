"""Constraints of the API that an OpenAPI 3.2 document cannot state, for schemathesis.

`cursor` and `offset` are each valid alone; together only with `offset=0` (the default), any
other offset beside a cursor is refused (400), a dependency between parameters that OpenAPI has
no way to express; generated requests never combine a cursor with a non-zero offset.

A request URI over the server's limit (60 KiB) is answered 414, as the document says, before
any parameter is read; a long parameter of many-byte characters gets there within its
`maxLength`, and schemathesis takes only a 4xx other than 414 for refusing a bad value.
Generated requests stay within the limit, so that what is checked is the parameter.
"""

from urllib.parse import urlencode

import schemathesis

# The server's URI limit, less room for the path.
MAX_QUERY_BYTES = 60 * 1024 - 1024


@schemathesis.hook
def filter_case(ctx, case):
    """Whole cases, so that every phase (coverage included) keeps to these constraints."""
    query = case.query
    if query and "cursor" in query and str(query.get("offset", 0)) != "0":
        return False
    return not query or len(urlencode(query, doseq=True)) <= MAX_QUERY_BYTES
