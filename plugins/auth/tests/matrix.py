"""One activemq.xml for the permission tests, and what each user may do.

Users (simpleAuthenticationPlugin): ``admin`` (plain password, group admins),
``app`` (an ENC(...) password made by ActiveMQ's ``activemq encrypt``, groups
apps, everyone), ``reader`` (a scrypt hash, groups consumers, everyone).
"""

from __future__ import annotations

from relaymq_auth.passwords import hash_password

#: ActiveMQ's documented example: `activemq encrypt --password activemq --input mypassword`
ENC_KEY = "activemq"
ENC_MYPASSWORD = "ENC(eeWjNyX6FY8Fjp3E+F6qTytV11bZItDp)"
READER_HASH = hash_password("readerpw", ln=10)

PASSWORDS = {"admin": "adminpw", "app": "mypassword", "reader": "readerpw"}

AUTHORIZATION = """
<authorizationPlugin><map><authorizationMap>
  <authorizationEntries>
    <authorizationEntry queue=">" read="admins" write="admins" admin="admins"/>
    <authorizationEntry queue="orders.>" read="consumers,admins" write="apps,admins" admin="apps,admins"/>
    <authorizationEntry queue="orders.audit" read="admins" write="admins" admin="admins"/>
    <authorizationEntry topic=">" read="admins" write="admins" admin="admins"/>
    <authorizationEntry topic="events.*" read="everyone" write="apps" admin="everyone"/>
    <authorizationEntry topic="ActiveMQ.Advisory.>" read="everyone" write="everyone" admin="everyone"/>
  </authorizationEntries>
  <tempDestinationAuthorizationEntry>
    <tempDestinationAuthorizationEntry read="apps,admins" write="apps,admins" admin="apps,admins"/>
  </tempDestinationAuthorizationEntry>
</authorizationMap></map></authorizationPlugin>
"""


def simple_auth(anonymous: bool = False) -> str:
    return f"""
<simpleAuthenticationPlugin anonymousAccessAllowed="{str(anonymous).lower()}">
  <users>
    <authenticationUser username="admin" password="adminpw" groups="admins"/>
    <authenticationUser username="app" password="{ENC_MYPASSWORD}" groups="apps,everyone"/>
    <authenticationUser username="reader" password="{READER_HASH}" groups="consumers,everyone"/>
  </users>
</simpleAuthenticationPlugin>"""


def plugins(anonymous: bool = False, authorization: bool = True) -> str:
    return ("<plugins>" + simple_auth(anonymous) + (AUTHORIZATION if authorization else "")
            + "</plugins>")


#: (user, operation, destination, allowed); operations: send, consume, browse.
#: Destinations are created first by admin unless the case is about creation.
MATRIX = [
    ("app", "send", "queue://orders.new", True),
    ("reader", "send", "queue://orders.new", False),
    ("app", "consume", "queue://orders.new", False),
    ("reader", "consume", "queue://orders.new", True),
    ("reader", "browse", "queue://orders.new", True),
    ("app", "browse", "queue://orders.new", False),
    # every matching entry grants (as ActiveMQ): orders.> still lets apps write
    # orders.audit and consumers read it; only queue '>' matches payments
    ("app", "send", "queue://orders.audit", True),
    ("reader", "consume", "queue://orders.audit", True),
    ("admin", "send", "queue://orders.audit", True),
    ("app", "send", "queue://payments", False),
    ("admin", "consume", "queue://payments", True),
    ("app", "send", "topic://events.created", True),
    ("reader", "send", "topic://events.created", False),
    ("reader", "consume", "topic://events.created", True),
    # '*' is one segment: events.a.b falls to topic '>' (admins)
    ("reader", "consume", "topic://events.a.b", False),
    ("reader", "consume", "topic://ActiveMQ.Advisory.Queue", True),
    ("admin", "consume", "topic://ActiveMQ.Advisory.Queue", True),  # from topic '>'
    ("admin", "send", "topic://ActiveMQ.Advisory.Queue", True),
    ("reader", "send", "topic://events.a.b", False),
]

#: (user, operation, destination, may create): the first send or subscribe creates it
CREATE = [
    ("app", "send", "queue://orders.fresh", True),         # apps have admin on orders.>
    ("reader", "consume", "queue://orders.fresh", False),  # consumers may read, not create
    ("reader", "consume", "topic://events.fresh", True),   # everyone has admin on events.*
    ("app", "send", "topic://events.fresh", True),
]
