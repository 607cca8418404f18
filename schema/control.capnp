@0xae6007a46ec6c89f;
# bamboo control frames. Fields are only ever added, never renumbered or removed;
# a reader of minor version n reads frames of any minor version of the same major.

$import "/capnp/c++.capnp".namespace("bamboo::wire");

const majorVersion :UInt16 = 1;
const minorVersion :UInt16 = 1;

struct Heartbeat {
  node @0 :UInt32;
  generation @1 :UInt64;
  step @2 :UInt64;
  timeMs @3 :Int64;
}

struct PreemptionNotice {
  node @0 :UInt32;
  deadlineMs @1 :Int64;
}

struct JoinRequest {
  node @0 :UInt32;
  zone @1 :Text;
  version @2 :Text;
  proof @3 :Data;   # HMAC of the manager's challenge with the cluster token
}

struct StageAssignment {
  pipeline @0 :UInt32;
  stage @1 :UInt32;
  node @2 :UInt32;
  shadowNode @3 :UInt32;
}

struct Plan {
  generation @0 :UInt64;
  pipelines @1 :UInt32;
  stages @2 :UInt32;
  assignments @3 :List(StageAssignment);
  redundancy @4 :Text;
  globalBatch @5 :UInt32;
  microBatch @6 :UInt32;
  cursor @7 :UInt64;
  checkpoint @8 :Text;
}

struct StepReport {
  node @0 :UInt32;
  stage @1 :UInt32;
  generation @2 :UInt64;
  step @3 :UInt64;
  lossSum @4 :Float64;
  gradSquares @5 :Float64;
  forwards @6 :UInt32;    # forwards this stage computed in the step
  backwards @7 :UInt32;
  frc @8 :UInt32;         # forward redundant computations for the successor
  inherited @9 :UInt32;   # forwards taken over from FRC on promotion
}

struct Commit {
  generation @0 :UInt64;
  step @1 :UInt64;
  clipCoef @2 :Float64;
}

# Joining (1.1): the manager answers a challenge request with a nonce; the
# join request proves the cluster token as HMAC-SHA256(token, nonce).
struct ChallengeRequest {
  node @0 :UInt32;   # the id the worker asks for (its --node), or 0xffffffff
}

struct JoinChallenge {
  nonce @0 :Data;
}

struct JoinAccept {
  node @0 :UInt32;
  generation @1 :UInt64;
  storePort @2 :UInt16;   # the rendezvous store of the tensor transport
}

struct JoinRefused {
  reason @0 :Text;
}

# Sent back when a frame cannot be used (bad size, version, bytes).
struct FrameRejected {
  reason @0 :Text;
}

struct Frame {
  major @0 :UInt16;
  minor @1 :UInt16;
  body :union {
    heartbeat @2 :Heartbeat;
    preemption @3 :PreemptionNotice;
    join @4 :JoinRequest;
    plan @5 :Plan;
    stepReport @6 :StepReport;
    commit @7 :Commit;
    challengeRequest @8 :ChallengeRequest;
    challenge @9 :JoinChallenge;
    accept @10 :JoinAccept;
    refused @11 :JoinRefused;
    rejected @12 :FrameRejected;
  }
}
