@0xae6007a46ec6c89f;
# bamboo control frames. Fields are only ever added, never renumbered or removed;
# a reader of minor version n reads frames of any minor version of the same major.

$import "/capnp/c++.capnp".namespace("bamboo::wire");

const majorVersion :UInt16 = 1;
const minorVersion :UInt16 = 9;

struct Heartbeat {
  node @0 :UInt32;
  generation @1 :UInt64;
  step @2 :UInt64;
  timeMs @3 :Int64;
  actors @4 :List(ActorRow); # 1.9: the sender's actors, for bamboo-inspect
}

# One actor as bamboo-inspect lists it (1.9): what it is, where, in which
# state, what it is doing now and how many messages wait for it.
struct ActorRow {
  kind @0 :Text;       # manager, gateway, stage, shadow, detector, agent
  node @1 :Int32;      # -1: the manager's process
  stage @2 :Int32;     # the stage p*S+s it runs or shadows; -1: none
  state @3 :Text;      # active, shadow, promoting, running, paused, ...
  doing @4 :Text;      # "step 12 B3", "idle", "sum", ...
  mailbox @5 :UInt32;  # messages waiting, as the actor last saw its mailbox
  ageMs @6 :Int64;     # since the actor last said what it does
}

struct PreemptionNotice {
  node @0 :UInt32;
  deadlineMs @1 :Int64;
}

struct JoinRequest {
  node @0 :UInt32;
  zone @1 :Text;
  version @2 :Text;
  proof @3 :Data;   # 1.6: HMAC-SHA256(token, "bamboo-worker", both nonces and
                    # both identities); before 1.6 of the manager's nonce alone
  model @4 :Text;       # 1.8: the trainer's own model this worker builds ("": the
                        # built-in ones only)
  modelDigest @5 :Text; # 1.8: its configuration's digest (model_digest)
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
  tensorSquares @10 :List(Float64); # 1.10: each parameter's squared gradient norm, in layer order
}

struct Commit {
  generation @0 :UInt64;
  step @1 :UInt64;
  clipCoef @2 :Float64;
}

# Joining (1.1, mutual since 1.6): the worker sends a nonce and its identity,
# the manager answers with its own nonce, its identity and a proof of the token
# over both; the join request proves the token over the same. An identity is the
# CAF node id that the other side sees the sender as, so a relay fails.
struct ChallengeRequest {
  node @0 :UInt32;   # the id the worker asks for (its --node), or 0xffffffff
  nonce @1 :Data;    # 1.6: 32 fresh random bytes
  identity @2 :Text; # 1.6: the worker's CAF node id
}

struct JoinChallenge {
  nonce @0 :Data;
  proof @1 :Data;    # 1.6: HMAC-SHA256(token, "bamboo-manager", ...)
  identity @2 :Text; # 1.6: the manager's CAF node id
}

struct JoinAccept {
  node @0 :UInt32;
  generation @1 :UInt64;
  storePort @2 :UInt16;   # the rendezvous store of the tensor transport
  heartbeatMs @3 :UInt32; # 1.2: the period the manager expects heartbeats at
  heartbeatMisses @4 :UInt32; # 1.5: the manager heartbeats too; this many
                              # periods without one and it is lost (0: none)
}

struct JoinRefused {
  reason @0 :Text;
}

# Sent back when a frame cannot be used (bad size, version, bytes).
struct FrameRejected {
  reason @0 :Text;
}

# Training across processes (1.2). Manager-side actors stand for the stage and
# shadow actors of each worker; a frame's `target` names which one it is for.

struct TrainConfig {
  model @0 :Text;          # "gpt" or "bert"
  layers @1 :UInt32;
  dModel @2 :UInt32;
  heads @3 :UInt32;
  seqLen @4 :UInt32;
  vocab @5 :UInt32;
  mlpRatio @6 :UInt32;
  dropout @7 :Float64;
  lr @8 :Float64;
  minLrRatio @9 :Float64;
  warmupSteps @10 :UInt32;
  beta1 @11 :Float64;
  beta2 @12 :Float64;
  eps @13 :Float64;
  weightDecay @14 :Float64;
  clipNorm @15 :Float64;
  stages @16 :UInt32;
  microBatch @17 :UInt32;
  globalBatch @18 :UInt32;
  steps @19 :UInt32;
  seed @20 :UInt64;
  data @21 :Text;
  threads @22 :UInt32;
  redundancy @23 :Text;    # "off", "lazy" or "eager"
  pipelines @24 :UInt32;   # 1.7: data-parallel pipelines (0 from older writers: 1)
  modelDigest @25 :Text;   # 1.8: a trainer's own model (named by `model`): its digest
}

# Sets up a node: its stage, the replica it holds, the run's configuration.
struct Assign {
  node @0 :UInt32;         # the manager's number of the node
  stage @1 :UInt32;
  shadowStage @2 :Int32;   # -1: no replica on this node
  generation @3 :UInt64;
  config @4 :TrainConfig;
  resume @5 :Text;         # 1.5: the checkpoint (a step directory) to start from
}

# The manager-side actor of the node's replica introduces itself.
struct Attach {
  role @0 :Text;           # "shadow"
  generation @1 :UInt64;   # 1.5: of the plan it belongs to
}

struct RunStep {
  generation @0 :UInt64;
  step @1 :UInt64;
}

struct ProgressRequest {
  generation @0 :UInt64;
  request @1 :UInt64;
}

struct ProgressReport {
  request @0 :UInt64;
  stage @1 :UInt32;
  step @2 :Int64;
  forwards @3 :List(UInt32);
  backwards @4 :List(UInt32);
  frc @5 :List(UInt32);
  complete @6 :Bool;
  report @7 :StepReport;   # valid when complete
}

# Continue a step in a new generation (a survivor), or take a stage over (a
# promoted shadow).
struct Resume {
  generation @0 :UInt64;
  step @1 :UInt64;
  resendActivations @2 :List(UInt32);
  resendGradients @3 :List(UInt32);
  deliveredActivations @4 :List(UInt32);
  deliveredGradients @5 :List(UInt32);
  frcEnabled @6 :Bool;
  sumSource @7 :Int32 = -1;     # 1.7: the pipeline with the step's gradient sum
  sumTargets @8 :List(UInt32);  # 1.7: the pipelines it sends the sum to
}

# Whether a stage's replica exists: the owner sends it its gradients.
struct ShadowLink {
  present @0 :Bool;
}

struct StageDone {
  generation @0 :UInt64;
  step @1 :UInt64;
  stage @2 :UInt32;
}

struct StepFailed {
  generation @0 :UInt64;
  step @1 :UInt64;
  stage @2 :UInt32;
  reason @3 :Text;
}

# The end of a generation: every transfer of it fails at once.
struct GenerationEnd {
  generation @0 :UInt64;
  reason @1 :Text;
}

struct Leave {
  reason @0 :Text;
  stay @1 :Bool;           # 1.5: keep the membership, wait for a new assignment
}

# 1.3: a digest of each named tensor of a stage's state (parameters, both AdamW
# moments, the step counter), to compare runs bit for bit across processes.
struct TensorDigest {
  name @0 :Text;
  count @1 :UInt64;    # elements
  digest @2 :UInt64;   # FNV-1a 64 of the float32 bytes
}

struct StateRequest {
  request @0 :UInt64;
}

struct StateReport {
  request @0 :UInt64;
  tensors @1 :List(TensorDigest);
}

# 1.4: re-homing across processes. To an owner: send your exact state to the
# transport rank before yours; to a new replica (target 3 + its stage): be
# created, receive that state and load it. Both answer with StateCopied.
struct StateCopy {
  generation @0 :UInt64;
  step @1 :UInt64;     # the boundary: the state after step-1 committed
  request @2 :UInt64;
}

struct StateCopied {
  request @0 :UInt64;
  digest @1 :UInt64;   # FNV-1a 64 (8-byte words) of the flat state, as sent or loaded
  bytes @2 :UInt64;
  error @3 :Text;      # empty when the state was copied
}

# 1.5: checkpoints across processes. To an owner: write your state as of the
# boundary before `step` into `dir` (a step directory every node can reach);
# it answers with the file's name and digest, which go into the manifest.
struct CheckpointRequest {
  request @0 :UInt64;
  step @1 :UInt64;
  dir @2 :Text;
}

struct CheckpointWritten {
  request @0 :UInt64;
  file @1 :Text;       # its name inside the step directory
  sha256 @2 :Text;
  bytes @3 :UInt64;
  tensors @4 :UInt64;
  error @5 :Text;      # empty when written
}

# The tensor transport's rendezvous store, served by the manager over this
# channel (1.6): only members reach it, and no port of its own is open.
struct StoreRequest {
  request @0 :UInt64;
  op @1 :UInt8;          # 0 set, 1 get, 2 add, 3 compareSet, 4 delete, 5 check,
                         # 6 numKeys, 7 wait
  keys @2 :List(Text);   # one for all but check and wait
  value @3 :Data;        # set; compareSet's desired value
  expected @4 :Data;     # compareSet
  delta @5 :Int64;       # add
  timeoutMs @6 :UInt32;  # get and wait: how long the keys may take to appear
}

struct StoreReply {
  request @0 :UInt64;
  value @1 :Data;        # get, compareSet
  number @2 :Int64;      # add, delete (1: deleted), check (1: all there), numKeys
  error @3 :Text;        # empty on success ("timeout" when keys did not appear)
}

# The inspector (1.8): an observer (bamboo-inspect) that proves the token like a
# worker, after the same challenge, and never counts as a node. It asks; the
# manager answers, and never waits for it.
struct ObserveRequest {
  proof @0 :Data;   # HMAC-SHA256(token, "bamboo-inspect", both nonces and identities)
  operatorProof @1 :Data; # 1.10: HMAC-SHA256(operator token, "bamboo-operator", the same); empty: watch only
}

struct SnapshotRequest {
  request @0 :UInt64;
}

struct NodeStatus {
  node @0 :UInt32;
  zone @1 :Text;
  state @2 :Text;            # active, shadow, standby, degraded, lost, fenced, left
  heartbeatAgeMs @3 :Int64;  # since its last heartbeat; -1: not watched
}

struct ClusterEvent {
  timeMs @0 :Int64;          # since the manager started
  text @1 :Text;
}

struct ClusterSnapshot {
  request @0 :UInt64;
  model @1 :Text;
  generation @2 :UInt64;
  step @3 :Int64;            # the last committed step; -1 before the first
  steps @4 :Int64;           # of the run
  loss @5 :Float64;
  samplesPerS @6 :Float64;
  pipelines @7 :UInt32;
  stages @8 :UInt32;
  owners @9 :List(Int32);    # the node of each stage p*S+s
  shadows @10 :List(Int32);  # the node of its shadow; -1: none
  nodes @11 :List(NodeStatus);
  events @12 :List(ClusterEvent);   # the latest, oldest first
  losses @13 :List(Float64);        # the latest steps' losses, oldest first
  uptimeMs @14 :Int64;
  actors @15 :List(ActorRow);       # 1.9
  paused @16 :Bool;                 # 1.9: no step starts until resume
  redundancy @17 :Text;             # 1.9: off, lazy or eager
}

# An observer's command (1.8): `words` as typed ("preempt", "2"); answered
# with what was done, or why not.
struct Command {
  request @0 :UInt64;
  words @1 :List(Text);
}

struct CommandAnswer {
  request @0 :UInt64;
  ok @1 :Bool;
  text @2 :Text;
}

# The manager to a worker (1.8): "preempt" (its process dies at once, as a
# kill -9 would end it) or "notice" (a preemption notice, as a SIGTERM gives;
# `seconds` > 0 sets the deadline), for an operator's command.
struct Order {
  kind @0 :Text;
  seconds @1 :Float64;
  reason @2 :Text;
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
    assign @13 :Assign;
    attach @14 :Attach;
    runStep @15 :RunStep;
    progressRequest @16 :ProgressRequest;
    progressReport @17 :ProgressReport;
    resume @18 :Resume;
    shadowLink @19 :ShadowLink;
    committed @20 :StageDone;
    synced @21 :StageDone;
    stepFailed @22 :StepFailed;
    generationEnd @23 :GenerationEnd;
    leave @24 :Leave;
    syncLost @25 :StageDone;   # a shadow did not get the owner's gradients
    resync @26 :StageDone;     # the owner sends them again
    stateRequest @28 :StateRequest;   # 1.3
    stateReport @29 :StateReport;     # 1.3
    stateCopy @30 :StateCopy;         # 1.4
    stateCopied @31 :StateCopied;     # 1.4
    checkpointRequest @32 :CheckpointRequest;   # 1.5
    checkpointWritten @33 :CheckpointWritten;   # 1.5
    storeRequest @34 :StoreRequest;   # 1.6
    storeReply @35 :StoreReply;       # 1.6
    observe @36 :ObserveRequest;      # 1.8
    snapshotRequest @37 :SnapshotRequest; # 1.8
    snapshot @38 :ClusterSnapshot;    # 1.8
    command @39 :Command;             # 1.8
    commandAnswer @40 :CommandAnswer; # 1.8
    order @41 :Order;                 # 1.8
  }
  target @27 :UInt32;   # 1.2: the actor a frame is for (0 none, 1 stage,
                        # 2 shadow; 1.4: 3 + s, a replica of stage s added later)
}
