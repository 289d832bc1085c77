# Types of the vllmstat_client module, which is vllmstat.client under its first import name.
from vllmstat.client import *
from vllmstat.client import DEFAULT_URL as DEFAULT_URL
from vllmstat.client import Record as Record
from vllmstat.client import __version__ as __version__
