"""A stand-in for the user's browser, for OAuth clients that open one (the MCP Inspector CLI
runs `$BROWSER URL` through xdg-open): logs in as $BROWSER_LOGIN at the test's OpenID provider
(sent as login_hint; see idp.mjs, which answers login and consent at once) and follows the
redirects back to the client's loopback callback, as a browser would.

Usage: BROWSER_LOGIN=alice python browser.py AUTHORIZATION_URL
Prints each hop and the final status, for the test's log.
"""

import os
import sys
from urllib.parse import urlencode

import httpx2


def main() -> None:
    url = sys.argv[1]
    login = os.environ["BROWSER_LOGIN"]
    sep = "&" if "?" in url else "?"
    location = f"{url}{sep}{urlencode({'login_hint': login})}"
    # One client: the provider's interaction cookies carry from hop to hop.
    with httpx2.Client(follow_redirects=True, timeout=30) as browser:
        response = browser.get(location)
        for hop in response.history:
            print(hop.status_code, hop.url, flush=True)
        print(response.status_code, response.url, flush=True)
        if response.status_code != 200:
            sys.exit(f"the flow ended at HTTP {response.status_code}: {response.text[:300]}")


if __name__ == "__main__":
    main()
