-- Argo CD health check for Strata's custom resources (KafkaCluster,
-- FastBucket, KafkaTopic, KafkaUser, KafkaRebalance in kafka.strata.dev).
-- Their status follows the kstatus conventions, so one script serves all:
--   * status.observedGeneration behind metadata.generation: the operator
--     has not looked at the latest spec yet -> Progressing
--   * ReconciliationPaused True (the pause-reconciliation annotation)
--     -> Suspended
--   * Stalled True: the spec cannot be realised (reason and message say
--     why) -> Degraded
--   * Reconciling True: rolling, scaling, moves running -> Progressing
--   * a KafkaRebalance whose proposal waits for approval, or that was
--     stopped: nothing is wrong, a person decides -> Suspended
--   * Ready True -> Healthy; Ready False -> Degraded
-- Install it through argocd-cm (config/argocd/argocd-cm.yaml); the Go
-- package beside it runs this file in tests.
local hs = { status = "Progressing", message = "Waiting for the Strata operator to report status" }
if obj.status == nil then
  return hs
end

local conditions = {}
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    conditions[c.type] = c
  end
end

local function describe(c)
  local msg = c.reason or c.type
  if c.message ~= nil and c.message ~= "" then
    msg = msg .. ": " .. c.message
  end
  return msg
end

local paused = conditions["ReconciliationPaused"]
if paused ~= nil and paused.status == "True" then
  hs.status = "Suspended"
  hs.message = describe(paused)
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.message = "Waiting for the Strata operator to observe generation " .. tostring(generation)
  return hs
end

local stalled = conditions["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end

local reconciling = conditions["Reconciling"]
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = describe(reconciling)
  return hs
end

if obj.kind == "KafkaRebalance" and (obj.status.state == "ProposalReady" or obj.status.state == "Stopped") then
  hs.status = "Suspended"
  if obj.status.state == "ProposalReady" then
    hs.message = "ProposalReady: waiting for approval (annotate kafka.strata.dev/rebalance=approve)"
  else
    hs.message = "Stopped: annotate kafka.strata.dev/rebalance=refresh for a new proposal"
  end
  local r = conditions["Ready"]
  if r ~= nil and r.message ~= nil and r.message ~= "" then
    hs.message = hs.message .. "; " .. r.message
  end
  return hs
end

local ready = conditions["Ready"]
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end
if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(ready)
  return hs
end
return hs
