"""The store's scripts: every decision the shared limiters make, in Lua, on the store's clock.

Each decision is written once, as a Lua function, and the scripts are built from those
functions: one engine's admission (`ADMIT_SCRIPT`), one caller's tool limit
(`WINDOW_SCRIPT`), and a web_search call's tool limit with every engine it asks
(`SEARCH_SCRIPT`), so that a search costs the store one round trip. Times are integer
microseconds of the store's `TIME`; numbers travel as decimal strings, which Lua's doubles
hold exactly (a time in microseconds stays below 2^53 for centuries).

- An engine's admission is GCRA: a theoretical arrival time (TAT) per engine, moved one
  interval later by each admitted call; a call may start once the TAT is at most
  (burst − 1) intervals ahead; a call whose turn would come after its deadline is refused
  and takes no turn. The answer is (wait, mine, previous): the microseconds to wait and the
  TATs the call set and replaced ("" for none), for a give-back; or, when refused, (-1, the
  microseconds until the turn, "").
- A caller's tool limit is a sliding window of admitted calls' times in a sorted set; a call
  is admitted while fewer than the limit are in the window. The answer is (1, 0) when
  admitted, (0, the microseconds until a call would be) otherwise.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ADMIT_SCRIPT", "GIVE_BACK_SCRIPT", "SEARCH_SCRIPT", "WINDOW_SCRIPT"]

_FUNCTIONS: Final = """
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function text(n)
  return string.format('%.0f', n)
end

local function admit(key, interval, tolerance, max_wait, now)
  local stored = redis.call('GET', key)
  local turn = now
  local base = now
  if stored then
    local tat = tonumber(stored)
    if tat - tolerance > now then turn = tat - tolerance end
    if tat > now then base = tat end
  end
  local wait = turn - now
  if max_wait >= 0 and wait > max_wait then
    return '-1', text(wait), ''
  end
  local mine = base + interval
  redis.call('SET', key, text(mine), 'PX', text(math.ceil((mine - now) / 1000) + 1000))
  return text(wait), text(mine), stored or ''
end

local function window(key, limit, span, member, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', text(now - span))
  if redis.call('ZCARD', key) >= limit then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return '0', text(tonumber(oldest[2]) + span - now)
  end
  local stamp = text(now)
  redis.call('ZADD', key, stamp, stamp .. ':' .. member)
  redis.call('PEXPIRE', key, text(math.ceil(span / 1000) + 1000))
  return '1', '0'
end
"""

# KEYS[1]: the engine's TAT. ARGV: interval_us, tolerance_us, max_wait_us (-1: no deadline).
# Returns {wait_us, mine, previous}.
ADMIT_SCRIPT: Final = (
    _FUNCTIONS
    + """
local wait, mine, previous = admit(
  KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), now_us())
return {wait, mine, previous}
"""
)

# KEYS[1]: the caller's window. ARGV: limit, window_us, a unique member suffix.
# Returns {admitted, wait_us}.
WINDOW_SCRIPT: Final = (
    _FUNCTIONS
    + """
local admitted, wait = window(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], now_us())
return {admitted, wait}
"""
)

# KEYS[1]: the caller's window; KEYS[2..n+1]: the TATs of the n engines the call asks.
# ARGV[1..3]: as WINDOW_SCRIPT; then, per engine, ARGV as ADMIT_SCRIPT's. One clock reading
# for all. Returns {admitted, wait_us} when the caller's limit refuses the call (no engine
# is touched: a refused call takes no turn), else {1, 0} followed by each engine's
# {wait_us, mine, previous}, in the order of KEYS.
SEARCH_SCRIPT: Final = (
    _FUNCTIONS
    + """
local now = now_us()
local admitted, wait = window(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], now)
local answer = {admitted, wait}
if admitted ~= '1' then return answer end
for i = 2, #KEYS do
  local a = 4 + (i - 2) * 3
  local turn, mine, previous = admit(
    KEYS[i], tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), now)
  answer[#answer + 1] = turn
  answer[#answer + 1] = mine
  answer[#answer + 1] = previous
end
return answer
"""
)

# KEYS[1]: the engine's TAT. ARGV: mine, previous. Puts `previous` back only when no later
# call moved the TAT since (the in-process limiter's rule); 1 when it did.
GIVE_BACK_SCRIPT: Final = (
    _FUNCTIONS
    + """
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  local keep_ms = math.max(1, math.ceil((tonumber(ARGV[2]) - now_us()) / 1000) + 1000)
  redis.call('SET', KEYS[1], ARGV[2], 'PX', text(keep_ms))
end
return 1
"""
)
